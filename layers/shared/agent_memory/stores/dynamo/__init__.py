"""The DynamoDB stores: sessions (``store.DynamoSessionStore``) and forgotten events (``claims.DynamoClaimStore``).

Nothing is imported here: a function imports the module it uses (``stores.dynamo.store``, ``stores.dynamo.claims``),
so that the claims store does not load the session store, nor either one what the other needs. ``store`` describes
the table's items.
"""
