"""Pure decisions: no I/O, exhaustively unit-tested."""
