"""Every config value checked once, before any model loads: validation.prepare_config over one check per group (config_checks); the entry scripts' secret check (secret_check)."""
