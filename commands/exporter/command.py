"""``exporter``: the ledger's state and activity for Prometheus, on ``/metrics``."""

from __future__ import annotations

import signal
import threading

import click
from msgspec import Struct

from resource_extend.commands.exporter.listen import DEFAULT_HOST, Address, parse_listen
from resource_extend.commands.program import installed_version
from resource_extend.commands.protocol import Answer, Session, report_failure, respond
from resource_extend.commands.under_click import answered, click_plugin
from resource_extend.ledger.model.errors import PluginError

TYPE_CHECKING = False
if TYPE_CHECKING:  # the server's modules load once the command runs
    from wsgiref.simple_server import WSGIServer

    from resource_extend.commands.exporter.refresh import Refresher
    from resource_extend.commands.exporter.serve import App

INSTALL_HINT = "pip install 'resource-extend[exporter]' (or pip install prometheus-client)"


def listen_address(ctx: click.Context, _: click.Parameter, value: str | None) -> Address:
    """``--listen`` (a click callback): an address not understood is a usage error; none
    given, loopback on this program's port."""
    if value is None:
        return Address(DEFAULT_HOST, click_plugin(ctx).exporter_port)
    try:
        return parse_listen(value)
    except PluginError as exc:
        raise click.UsageError(exc.reason, ctx) from None


@click.command("exporter")
@click.option(
    "--listen",
    "address",
    callback=listen_address,
    metavar="HOST:PORT",
    help="Where to serve /metrics: HOST:PORT, [IPv6]:PORT, or :PORT for every address.  "
    "[default: 127.0.0.1:{port}]",
)
@click.option(
    "--every",
    type=click.FloatRange(min=0.1),
    default=15.0,
    show_default=True,
    metavar="SECONDS",
    help="Read etcd every SECONDS (scrapes are answered from the last read).",
)
@click.option(
    "--stale-after",
    type=click.FloatRange(min=0.1),
    metavar="SECONDS",
    help="Stop serving node series read longer ago than this (default: twice --every).",
)
@click.option(
    "--verify-every",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="Pause between two verify passes over every stream (0: no verify, no drift gauge).",
)
@answered
def exporter(
    session: Session[Struct],
    address: Address,
    every: float,
    stale_after: float | None,
    verify_every: float,
) -> Answer:
    """Serve the ledger's metrics to Prometheus on http://HOST:PORT/metrics, until stopped
    (SIGTERM or SIGINT: the server closes, the background jobs end, exit status 0).

    \b
      {prog} exporter                              # 127.0.0.1:{port}, etcd read every 15 s
      {prog} exporter --listen :{port} --every 30   # every address; a read every 30 s
      {prog} exporter --verify-every 0             # no verify passes (no drift gauge)
      curl -s http://127.0.0.1:{port}/metrics

    The default ports, 18464 (resource-gpu) and 18465 (resource-storage), let both run on one
    host. They lie outside 9100-9999, the range Prometheus keeps for exporters (full, with
    9464 taken by OpenTelemetry's), below Linux's ephemeral ports (32768 on), and in neither
    Debian's /etc/services nor nmap's table of ports.

    \b
    Metrics, <p> standing for resource_gpu_ (resource-gpu) or resource_storage_:
      <p>capacity_cards, <p>used_cards {nodename,product}         resource-gpu
      <p>volume_capacity_bytes, <p>volume_used_bytes {nodename,volume}  resource-storage
      <p>capacity_bytes, <p>used_bytes {nodename}
      <p>disk_capacity_iops, <p>disk_used_iops,
      <p>disk_capacity_bytes_per_second, <p>disk_used_bytes_per_second
                                               {nodename,device,direction}
      <p>stream_events {nodename}              events its stream holds in etcd
      <p>last_event_age_seconds {nodename}     seconds since its last event
      <p>nodes                                 nodes with a record
      <p>drifted_nodes                         heads that disagree with their stream
      <p>appends_total {verb}                  events appended (since the exporter started)
      <p>cas_retries_total {verb}              compare-and-swaps they lost first
      <p>write_failures_total {verb}           writes that gave up (counted in etcd)
      <p>etcd_up                               1 when the last read of etcd worked
      <p>last_refresh_timestamp_seconds, <p>refresh_duration_seconds,
      <p>last_verify_timestamp_seconds, <p>verify_duration_seconds

    resource_extend_build_info {program,version} is 1: the release each exporter runs.

    Series join core's own: core reports gpu_capacity and gpu_used {podname,nodename,product}
    and storage_capacity and storage_used {podname,nodename} from the same node records, so
    "gpu_used - on(nodename, product) resource_gpu_used_cards" is 0 while both agree (and
    likewise storage_used and resource_storage_used_bytes). The ledger knows no pod: join on
    nodename.

    A background job reads etcd every --every seconds: one paged range over every node's
    record, two point reads a node for its stream's length, and the events appended since
    the last read (only for the nodes whose record moved; in windows of seqs, never a range
    over a whole stream). A scrape costs etcd nothing: it is answered from that read, in
    memory. Appends and lost compare-and-swaps are counted from the events themselves (each
    names its verb, and the compare-and-swaps it lost), from the exporter's start; writes
    that gave up are counted in etcd by their writers, so every exporter sees them all.

    Another job walks every stream as "{prog} verify --all" does (its checks of exports
    aside), --verify-every seconds after its last pass ended: drifted_nodes is what the last
    pass found, and "{prog} verify --all" names them.

    While etcd cannot be read, etcd_up is 0 and one line on stderr says so; node series,
    drifted_nodes and the write failures are served until they are --stale-after old, then
    dropped (never served as current) until etcd is read again. It starts with etcd away
    too. On start one line on stdout names the URL served; on stop, one line says so.
    """
    stale = stale_window(every, stale_after)
    stopping = threading.Event()
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, lambda *_: stopping.set())
    needs_prometheus_client()
    from resource_extend.commands.exporter import serve as http

    refresher, app = assembled(session, stale)
    server = http.listen(address, app)
    jobs = started(server, refresher, every, verify_every, stopping)
    served = http.bound(server, address)
    respond(f"serving {served.url}", text=True, io=session.io)
    try:
        while not stopping.wait(1.0):
            pass
    finally:
        stopping.set()
        server.shutdown()
        server.server_close()
        for job in jobs:
            job.join(timeout=session.config.etcd.timeout + 1)
    return f"stopped serving {served.url}"


def stale_window(every: float, stale_after: float | None) -> float:
    """Seconds a node series is served after its read: ``--stale-after``, by default twice
    ``--every``; a usage error when shorter than ``--every``."""
    stale = 2 * every if stale_after is None else stale_after
    if stale < every:
        raise click.UsageError(
            f"--stale-after {stale:g} is shorter than --every {every:g}: every series "
            "would go stale between two reads",
            click.get_current_context(),
        )
    return stale


def needs_prometheus_client() -> None:
    """The ``[exporter]`` extra is installed, or a PluginError saying how to install it."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise PluginError(f"prometheus-client is not installed: {INSTALL_HINT}") from None


def assembled(session: Session[Struct], stale: float) -> tuple[Refresher, App]:
    """What serves: the refresher (the background reads, each rendered for a scrape, their
    failures one line on stderr) and the WSGI app that answers from its last read."""
    from resource_extend.commands.exporter import serve as http
    from resource_extend.commands.exporter.refresh import Refresher
    from resource_extend.commands.exporter.view import prefix_of, view_families

    program = session.plugin.name
    prefix, kind_gauges = prefix_of(program), session.plugin.parts.gauges

    def report(line: str, failure: bool) -> None:
        if failure:
            report_failure(program, "exporter", None, line, session.io)
        else:
            respond(line, text=True, io=session.io)

    refresher = Refresher(
        session.config.etcd,
        session.kind,
        kind_gauges,
        lambda view: http.render(view_families(view, prefix, kind_gauges)),
        report,
    )
    app = http.metrics_app(
        lambda: refresher.status, prefix, stale, program=program, version=installed_version()
    )
    return refresher, app


def started(
    server: WSGIServer,
    refresher: Refresher,
    every: float,
    verify_every: float,
    stopping: threading.Event,
) -> list[threading.Thread]:
    """The background jobs, started: the HTTP server, the reads every ``every`` seconds and,
    unless ``verify_every`` is 0, the verify passes; each ends once ``stopping`` is set."""
    jobs = [
        threading.Thread(target=server.serve_forever, name="http", daemon=True),
        threading.Thread(
            target=refresher.refresh_every, args=(every, stopping), name="refresh", daemon=True
        ),
    ]
    if verify_every > 0:
        verify = (verify_every, stopping)
        jobs.append(
            threading.Thread(target=refresher.verify_every, args=verify, name="verify", daemon=True)
        )
    for job in jobs:
        job.start()
    return jobs
