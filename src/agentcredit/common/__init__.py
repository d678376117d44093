"""The base every layer may use: config helpers and ConfigError (configs), package paths (paths), secret keys (secret_keys), checkpoint files with their integrity digest (checkpoint_file)."""
