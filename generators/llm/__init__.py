"""The one client for OpenAI-compatible endpoints (vLLM, llama.cpp, hosted APIs)."""
