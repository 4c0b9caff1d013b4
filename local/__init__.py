"""The Docker-free local API: moto for DynamoDB, S3 and EventBridge; the real handlers behind HTTP."""
