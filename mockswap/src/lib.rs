//! mockswap: a test double of a llama-swap proxy and a fake upstream model server.
