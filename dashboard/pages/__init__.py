"""Dashboard pages: plain Streamlit scripts."""
