#!/bin/sh
# Run once by the postgres image's entrypoint when it creates the primary's data
# directory: streaming replicas (docker-compose.yml's postgres-replica) connect as the
# database's own user, with its password, from the compose network.
set -e
echo "host replication all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
