"""Front ends (one per transport), the session table and the server."""
