"""The runs app's pages, API, forms and websocket consumer: thin adapters over services and selectors."""
