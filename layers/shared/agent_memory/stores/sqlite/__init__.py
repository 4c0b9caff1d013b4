"""The embedded backend: every store of ``make run`` and single-machine deployments in one SQLite file (stdlib
``sqlite3``). Import what you need from its modules; this package imports none of them, so that a process pays
only for what it uses:

- ``schema``    the tables, their version and their creation
- ``database``  ``SqliteDatabase``: connections, pragmas, transactions, storage errors as domain errors
- ``rows``      how a stored row reads (events, state, memos, session rows), never failing on a bad value
- ``sessions``  session rows and state: create, read, list, delete
- ``appends``   storing events (client appends and compactions) with their outbox rows
- ``reads``     reading events: pages and the tail
- ``deletion``  deleting events and settling what was derived from them
- ``transfer``  the memo and a whole session at once (import)
- ``due``       the compaction schedule's due index
- ``feed``      the change feed: the outbox as DynamoDB stream records
- ``claims``    ``SqliteClaimStore``: forgotten events of long-term memory
- ``store``     ``SqliteSessionStore``: the ``SessionStore`` and ``ChangeFeed`` ports over the modules above
- ``memories`` / ``memory_statements``  ``SqliteMemoryStore``: long-term memory (its own connections)
"""
