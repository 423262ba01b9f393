/*
 * cluster_file.h: cluster descriptions as JSON data files (jansson).
 * The format, every key and its unit, is documented in docs/clusters.md;
 * shipped files live in data/clusters/NAME.json.
 */
#ifndef PLACER_INPUTS_CLUSTER_FILE_H
#define PLACER_INPUTS_CLUSTER_FILE_H

#include <stddef.h>

#include "cluster.h"
#include "status.h"

/* Parse a JSON text into *out (validated with cluster_validate). Returns
 * PL_OK, or PL_ERR_INVALID with a one-line message (JSON syntax error with
 * its line and column, a missing or ill-typed key named by its path, an
 * impossible value); *out untouched on failure. */
pl_status cluster_parse_json(const char *text, size_t n, cluster *out, char *msg, size_t len);

/* Load a cluster by file path (anything containing '/' or ending ".json")
 * or by name: NAME.json in dir (NULL: the directories searched for
 * clusters: $PLACER_CLUSTERS, the source tree's data/clusters, then
 * ./data/clusters, data_file.h). PL_ERR_NOT_FOUND naming the cluster and
 * the shipped names when no such file exists; PL_ERR_IO; as
 * cluster_parse_json (the message starting with the file's path). */
pl_status cluster_load(const char *name_or_path, const char *dir, cluster *out, char *msg, size_t len);

#endif
