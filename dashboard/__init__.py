"""The SRE dashboard (Streamlit): pages over the views, the SQL console, export buttons."""
