#!/usr/bin/env python3
"""A TCP proxy that adds a delay to every request: each chunk a client
sends waits DELAY seconds before it goes on (a request of one segment, as
a GET, a HEAD or a LIST is, waits once); answers pass at once.

    delayproxy.py LISTEN_PORT TARGET_PORT DELAY_SECONDS
"""
import asyncio
import sys


async def pipe(reader, writer, delay):
    try:
        while True:
            data = await reader.read(1 << 20)
            if not data:
                break
            if delay:
                await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main(listen, target, delay):
    async def handle(cr, cw):
        try:
            sr, sw = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            cw.close()
            return
        await asyncio.gather(pipe(cr, sw, delay), pipe(sr, cw, 0))

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
