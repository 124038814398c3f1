"""``sample-config``: the files an install needs, from the installed package alone."""

from __future__ import annotations

import click

from resource_extend.commands.under_click import click_plugin
from resource_extend.ledger.model.errors import PluginError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin

SAMPLES = {
    "config": ("plugin.yaml.sample", "the plugin's config, every key commented: {config}"),
    "unit": ("{prog}-exporter.service", "a systemd unit running '{prog} exporter'"),
    "alerts": ("resource-extend-alerts.yml", "Prometheus alert rules, both programs'"),
    "dashboard": ("grafana-dashboard.json", "a Grafana dashboard of the exporter's series"),
}
"""What ``sample-config`` prints, by name: the file (in ``docs/``, shipped in the wheel as
``resource_extend.samples``) and what it is."""


def sample(plugin: Plugin, name: str) -> str:
    """The text of the sample called ``name``, this program's own where it differs."""
    import os

    import resource_extend.samples

    file = plugin.own_words(SAMPLES[name][0])
    # A data-only folder, so a namespace package: importlib.resources.files() fails on the
    # entries an editable install adds to its path, hence a look in each real directory.
    for directory in resource_extend.samples.__path__:
        path = os.path.join(directory, file)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as text:
                return text.read()
    raise PluginError(f"sample-config: {file} is missing from this install: reinstall it")


@click.command("sample-config")
@click.argument("what", type=click.Choice(list(SAMPLES)), default="config")
@click.option("--list", "listing", is_flag=True, help="List the samples, one a line.")
def sample_config(what: str, listing: bool) -> None:
    """Print a sample file an install needs: the config (the default), the exporter's
    systemd unit, the alert rules or the dashboard. Each comes with the package, so a host
    installed from the wheel alone has them; they are the files under docs/ in the source.

    \b
      {prog} sample-config > /etc/eru/plugins/{config}      # then edit etcd.machines
      {prog} sample-config unit > /etc/systemd/system/{prog}-exporter.service
      {prog} sample-config alerts > /etc/prometheus/rules/resource-extend-alerts.yml
      {prog} sample-config dashboard > resource-extend-dashboard.json
      {prog} sample-config --list
    """
    plugin = click_plugin()
    if listing:
        for name, (file, about) in SAMPLES.items():
            click.echo(f"{name:<10} {plugin.own_words(file):<30} {plugin.own_words(about)}")
        return
    click.echo(sample(plugin, what), nl=False)
