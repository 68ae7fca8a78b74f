"""Everything that proves: sandboxes, test execution and log parsing, the validation rule."""
