"""The connector author's API; import it from ``connect_runtime``, not from here."""
