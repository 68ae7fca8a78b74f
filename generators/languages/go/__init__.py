"""Go's building floor: detection, toolchain, environments, bug operators and texts."""
