import uvloop


def pytest_asyncio_loop_factories(config, item):
    """Run every async test on uvloop, as the server does."""
    return {"uvloop": uvloop.new_event_loop}
