"""Export's parts (scan, tables, shards, card, split) and publishing to the Hub."""
