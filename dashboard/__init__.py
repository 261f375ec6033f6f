"""The SRE dashboard (Streamlit) and the incident export."""
