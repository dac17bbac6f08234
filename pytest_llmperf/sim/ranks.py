"""The simulated engine over several nodes, as SGLang 0.5.23 runs one model over them.

``--nnodes N --node-rank K --dist-init-addr HOST:PORT`` (SGLang's flags): every node runs the
same command. Rank 0 listens on the init address and waits for the other N − 1 ranks (torch's
rendezvous) before it loads and serves HTTP; it is the only rank that does ("Non-zero-rank nodes
do not run tokenizer processes", srt/entrypoints/engine.py). A rank ≥ 1 connects to rank 0 and
then blocks, without an HTTP port, until rank 0's schedulers exit (http_server.py returns early
for those ranks), then exits. A rank that dies takes the model with it: rank 0 loses its
connection, says which rank, and exits with an error (NCCL would abort), so a launcher that
watches only rank 0 still sees the failure.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys

log = logging.getLogger("sglang.sim")
#: How long ranks wait for each other (torch's default rendezvous timeout is far longer).
RENDEZVOUS_S = 300.0


def parse_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise SystemExit(f"--dist-init-addr must be HOST:PORT, got {addr!r}")
    return host.strip("[]"), int(port)


class Rendezvous:
    """Rank 0's side: the other ranks' connections, kept open while it serves."""

    def __init__(self, nnodes: int) -> None:
        self.expected = nnodes - 1
        self.ranks: dict[int, asyncio.StreamWriter] = {}
        self.all_joined = asyncio.Event()
        self.lost = asyncio.Event()
        self.lost_rank: int | None = None
        self.closing = False

    async def joined(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        try:
            rank = int(line.decode().strip())
        except ValueError:
            writer.close()
            return
        self.ranks[rank] = writer
        log.info("rank %d joined (%d of %d)", rank, len(self.ranks), self.expected)
        if len(self.ranks) == self.expected:
            self.all_joined.set()
        await reader.read()  # EOF: that rank is gone
        if not (self.lost.is_set() or self.closing):
            self.lost_rank = rank
            self.lost.set()

    def release(self) -> None:
        """Rank 0 is shutting down: the other ranks' schedulers exit with it."""
        self.closing = True
        for writer in self.ranks.values():
            writer.close()


async def lead(nnodes: int, addr: str) -> tuple[Rendezvous, asyncio.Server]:
    """Rank 0: listen on the init address and wait for every other rank."""
    host, port = parse_addr(addr)
    rendezvous = Rendezvous(nnodes)
    server = await asyncio.start_server(rendezvous.joined, host, port, reuse_address=True)
    log.info("Init torch distributed begin: waiting for %d rank(s) on %s", nnodes - 1, addr)
    try:
        await asyncio.wait_for(rendezvous.all_joined.wait(), RENDEZVOUS_S)
    except asyncio.TimeoutError:
        log.error(
            "only %d of %d ranks joined within %g s",
            len(rendezvous.ranks),
            nnodes - 1,
            RENDEZVOUS_S,
        )
        raise SystemExit(1) from None
    log.info("Init torch distributed ends: %d nodes", nnodes)
    return rendezvous, server


async def follow(rank: int, addr: str) -> int:
    """A rank ≥ 1: join rank 0, then block until it goes (no HTTP server on this node)."""
    host, port = parse_addr(addr)
    deadline = asyncio.get_running_loop().time() + RENDEZVOUS_S
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            break
        except OSError:
            if asyncio.get_running_loop().time() > deadline:
                log.error("rank %d: rank 0 at %s never answered", rank, addr)
                return 1
            await asyncio.sleep(0.2)
    writer.write(f"{rank}\n".encode())
    await writer.drain()
    log.info(
        "rank %d joined rank 0 at %s. Non-zero-rank nodes do not run tokenizer processes; "
        "blocked until the schedulers exit.",
        rank,
        addr,
    )
    await reader.read()
    log.info("rank %d: rank 0 is gone; the schedulers exit.", rank)
    sys.stderr.flush()
    return 0


async def join(nnodes: int, rank: int, addr: str | None) -> tuple[int | None, Rendezvous | None]:
    """Before loading: ``(exit code, None)`` for a rank that never serves (a rank ≥ 1, which
    returns once rank 0 is gone, or a bad flag); ``(None, rendezvous)`` for rank 0 of several
    nodes once every rank joined; ``(None, None)`` on one node."""
    if nnodes <= 1:
        return None, None
    if not addr:
        log.error("--nnodes %d needs --dist-init-addr HOST:PORT (rank 0's address)", nnodes)
        return 1, None
    if rank > 0:
        return await follow(rank, addr), None
    rendezvous, _ = await lead(nnodes, addr)
    return None, rendezvous


def exit_when_lost(rendezvous: Rendezvous | None) -> asyncio.Task[None] | None:
    """Rank 0 exits with an error when another rank goes (the NCCL communicator aborts)."""
    if rendezvous is None:
        return None

    async def watch() -> None:
        await rendezvous.lost.wait()
        log.error("rank %s lost: NCCL communicator aborted; exiting.", rendezvous.lost_rank)
        sys.stderr.flush()
        os._exit(1)

    return asyncio.create_task(watch())
