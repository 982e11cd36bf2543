//! llama-swap configuration: parsing, macros, validation and resolved models.
