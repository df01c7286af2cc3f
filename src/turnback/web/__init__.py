"""``turnback serve``: a local web page and HTTP API over the engine (the ``web`` extra: Starlette, uvicorn).

``security`` (Host, token, Origin, headers), ``app`` (the routes), ``events`` (changes of the store as
Server-Sent Events), ``openapi`` (the API's description), ``server`` (uvicorn, the start line, signals).
"""
