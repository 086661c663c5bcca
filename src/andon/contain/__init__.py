"""What keeps agents and the code they write in their place (see README.md)."""
