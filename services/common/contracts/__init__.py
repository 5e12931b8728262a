"""The tensor contract of each modality, declared once: the served models and the router both import it."""
