"""Python client for serverless agent memory."""
