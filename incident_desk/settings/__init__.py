"""Every setting: the model, where values come from (flags, environment, the config file), errors."""
