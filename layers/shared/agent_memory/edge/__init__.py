"""The HTTP edge: the resolver and access checks, the route table, request and response models, parameters read
without pydantic, and the generated OpenAPI document."""
