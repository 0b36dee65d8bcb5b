"""Real brokers for the messaging tests: readers of what arrived, a private NATS server,
and a TCP proxy in front of RabbitMQ that a test can cut to make an outage of its own
without stopping the server other tests use."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import aio_pika
import nats
from eventcraft.messaging import JetStreamPublisher, Publisher, RabbitMQPublisher
from eventcraft.messaging.jetstream import connect
from eventcraft.messaging.loop import EventLoopThread

from ..conftest import missing
from ..ports import free_port as free_port  # also the tests' own, for a port nothing listens on

RABBITMQ_URL = os.environ.get("EVENTCRAFT_TEST_RABBITMQ", "amqp://guest:guest@127.0.0.1:5672/")
NATS_URL = os.environ.get("EVENTCRAFT_TEST_NATS", "nats://127.0.0.1:4222")


def unavailable(what: str, error: BaseException) -> NoReturn:
    missing(f"{what} is not reachable: {error}")


@dataclass(frozen=True)
class Received:
    message_id: str
    key: str
    body: bytes
    headers: dict[str, Any]
    correlation_id: str | None = None
    persistent: bool = True


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    pause = 0.01
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


class RabbitQueue:
    """A queue bound to every key of `exchange`, read back by the test."""

    def __init__(self, loop: EventLoopThread, exchange: str, url: str = RABBITMQ_URL) -> None:
        self.loop = loop
        self.name = f"{exchange}-test"
        self.received: list[Received] = []

        async def setup() -> Any:
            connection = await aio_pika.connect(url, timeout=10)
            channel = await connection.channel()
            declared = await channel.declare_exchange(
                exchange, aio_pika.ExchangeType.TOPIC, durable=True
            )
            queue = await channel.declare_queue(self.name, durable=True)
            await queue.bind(declared, "#")
            return connection, channel, queue

        self._connection, self._channel, self._queue = loop.run(setup(), 20)
        self._exchange = exchange

    def drain(self, until: Callable[[list[Received]], bool], timeout: float = 30) -> list[Received]:
        """Take messages off the queue until `until(all received so far)` holds."""
        deadline = time.monotonic() + timeout

        async def take() -> int:
            got = 0
            while True:
                message = await self._queue.get(no_ack=True, fail=False)
                if message is None:
                    return got
                got += 1
                self.received.append(
                    Received(
                        message_id=message.message_id or "",
                        key=message.routing_key or "",
                        body=message.body,
                        headers=dict(message.headers or {}),
                        correlation_id=message.correlation_id,
                        persistent=message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT,
                    )
                )

        while not until(self.received):
            if self.loop.run(take(), 20) == 0:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"timed out after {timeout} s with {len(self.received)} messages"
                    )
                time.sleep(0.05)
        return self.received

    def close(self) -> None:
        async def teardown() -> None:
            await self._queue.delete(if_unused=False, if_empty=False)
            exchange = await self._channel.get_exchange(self._exchange)
            await exchange.delete()
            await self._connection.close()

        self.loop.run(teardown(), 20)


class JetStreamReader:
    """Every message of a JetStream stream, in stream order."""

    def __init__(self, loop: EventLoopThread, stream: str, prefix: str, url: str = NATS_URL):
        self.loop = loop
        self.stream = stream
        self.prefix = prefix
        self.url = url

        async def setup() -> None:
            nc = await connect(url, 10)
            js = nc.jetstream()
            await js.add_stream(name=stream, subjects=[f"{prefix}.>"])
            await nc.close()

        loop.run(setup(), 20)

    def read(self, until: Callable[[list[Received]], bool], timeout: float = 30) -> list[Received]:
        deadline = time.monotonic() + timeout

        async def everything() -> list[Received]:
            nc = await connect(self.url, 10)
            try:
                js = nc.jetstream()
                info = await js.stream_info(self.stream)
                found = []
                for seq in range(info.state.first_seq, info.state.last_seq + 1):
                    msg = await js.get_msg(self.stream, seq)
                    headers = dict(msg.headers or {})
                    found.append(
                        Received(
                            message_id=headers.get("Nats-Msg-Id", ""),
                            key=msg.subject,
                            body=msg.data or b"",
                            headers=headers,
                        )
                    )
                return found
            finally:
                await nc.close()

        while True:
            found = self.loop.run(everything(), 60)
            if until(found):
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s with {len(found)} messages")
            time.sleep(0.05)

    def close(self) -> None:
        async def teardown() -> None:
            nc = await connect(self.url, 10)
            with suppress(Exception):
                await nc.jetstream().delete_stream(self.stream)
            await nc.close()

        self.loop.run(teardown(), 20)


class PrivateNats:
    """A nats-server with JetStream of the test's own, to stop and start at will."""

    def __init__(self, store_dir: Path) -> None:
        self.binary = shutil.which("nats-server") or "/usr/sbin/nats-server"
        self.port = free_port()
        self.store_dir = store_dir
        self.url = f"nats://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                *("-a", "127.0.0.1", "-p", str(self.port)),
                *("-js", "-sd", str(self.store_dir)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        async def ping() -> bool:
            try:
                nc = await connect(self.url, 1)
            except Exception:
                return False
            try:
                await nc.jetstream().account_info()
                return True
            except Exception:
                return False
            finally:
                await nc.close()

        loop = EventLoopThread("nats-ping")
        try:
            wait_for(lambda: loop.run(ping(), 5), 20, "the private nats-server")
        finally:
            loop.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


class TcpProxy:
    """Forwards 127.0.0.1:port to a target; `cut()` drops every connection and refuses
    new ones until `restore()`."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with suppress(OSError):
                sink.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        if self._listener is not None:
            # shutdown wakes the thread blocked in accept(), which close alone does not.
            with suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.cut()


@contextmanager
def event_loop() -> Iterator[EventLoopThread]:
    loop = EventLoopThread("test-brokers")
    try:
        yield loop
    finally:
        loop.close()


def check_rabbitmq(loop: EventLoopThread) -> None:
    async def probe() -> None:
        connection = await aio_pika.connect(RABBITMQ_URL, timeout=5)
        await connection.close()

    try:
        loop.run(probe(), 10)
    except Exception as error:
        unavailable(f"RabbitMQ at {RABBITMQ_URL}", error)


def check_nats(loop: EventLoopThread) -> None:
    async def probe() -> None:
        nc = await nats.connect(servers=[NATS_URL], connect_timeout=5, allow_reconnect=False)
        try:
            await nc.jetstream().account_info()
        finally:
            await nc.close()

    try:
        loop.run(probe(), 10)
    except Exception as error:
        unavailable(f"NATS JetStream at {NATS_URL}", error)


def make_publisher(kind: str, url: str, name: str) -> Publisher:
    if kind == "rabbitmq":
        return RabbitMQPublisher(url, exchange=name, timeout=3)
    return JetStreamPublisher(url, prefix=name, timeout=3)
