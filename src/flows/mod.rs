//! Flow files: the YAML model, validation with line/column errors, the DAG and its scheduling state.
