#!/bin/sh
# Create cortex's collection on a cluster before the first `cortex index`, with shards and
# replicas (cortex itself creates a missing collection with the server's defaults: one
# shard, one copy). Then cortex adds its payload indexes and one named dense vector per
# embedding model on first use.
#
#   QDRANT_URL=http://localhost:6333 QDRANT_API_KEY=... ./create-collection.sh [NAME]
set -eu
name="${1:-${CORTEX_QDRANT_COLLECTION:-cortex}}"
curl -fsS -X PUT "$QDRANT_URL/collections/$name" \
  -H "api-key: $QDRANT_API_KEY" -H "Content-Type: application/json" \
  -d '{
    "vectors": {},
    "shard_number": 6,
    "replication_factor": 2,
    "write_consistency_factor": 1,
    "on_disk_payload": true
  }'
echo
