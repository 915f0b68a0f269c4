"""Loop charts: authoring (dsl), named guards and actions, compiling and checking."""
