"""The PostgreSQL store (the ``postgres`` extra): one database shared by many hosts, values sealed on each."""
