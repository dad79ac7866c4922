"""Parses a /metrics body with Prometheus' own Python parsers (prometheus_client) and prints a JSON digest:
{family: {"type", "help", "samples": [[name, labels, value], ...]}}.

Usage: parse_metrics.py prometheus|openmetrics < body"""
import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_prometheus


def main() -> None:
    mode = sys.argv[1]
    text = sys.stdin.read()
    parse = parse_openmetrics if mode == "openmetrics" else parse_prometheus
    out = {}
    for family in parse(text):
        out[family.name] = {
            "type": family.type,
            "help": family.documentation,
            "samples": [[s.name, s.labels, s.value] for s in family.samples],
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
