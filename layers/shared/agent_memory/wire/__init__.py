"""JSON and YAML in and out: request bodies parsed and bounded, stored JSON read safely, responses encoded."""
