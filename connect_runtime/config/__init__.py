"""Worker and connector configuration: parsing, definitions, validation."""
