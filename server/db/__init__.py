"""The SQL cache: typed models, engines (SQLite embedded, PostgreSQL for teams), migrations, queries."""
