/* perf_json.c - the JSON twin of kolo-perf's table, schema
 * PERF_JSON_SCHEMA_VERSION: every field is in docs/perf-json.md, and a
 * change to a field's name, type or meaning comes with a new version. */
#include "perf/perf_report.h"

/* JSON string: the few characters our names can hold are escaped. */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
    else fputc(*s, f);
  }
  fputc('"', f);
}

static void json_key_str(FILE *f, const char *key, const char *value) {
  fprintf(f, ", \"%s\": ", key);
  json_str(f, value);
}

/* The command line's meaning, in nccl-tests' terms. */
static void json_flags(FILE *f, const perf_args *a) {
  json_key_str(f, "collective", perf_coll_name(a->coll));
  json_key_str(f, "type", perf_type_name(a->type));
  json_key_str(f, "redop", perf_redop_column(a));
  fprintf(f,
          ", \"root\": %d, \"minbytes\": %zu, \"maxbytes\": %zu, \"stepfactor\": %zu, \"stepbytes\": %zu, "
          "\"iters\": %d, \"warmup_iters\": %d, \"agg_iters\": %d, \"run_cycles\": %d, \"check\": %d, "
          "\"average\": %d, \"blocking\": %d, \"parallel_init\": %d, \"cudagraph\": %d, \"report_cputime\": %d, "
          "\"timeout_s\": %d, \"nthreads\": %d, \"ngpus\": %d",
          a->root, a->min_bytes, a->max_bytes, a->step_factor, a->step_bytes, a->iters, a->warmup, a->agg_iters,
          a->run_cycles, a->check, a->average, a->blocking, a->parallel_init, a->graph_launches,
          a->report_cputime, a->timeout_s, a->threads, a->gpus_per_thread);
  json_key_str(f, "placement", a->placement == PERF_PLACE_BOTH ? "both" : a->placement == PERF_PLACE_IN ? "in" : "out");
}

void perf_json_head(FILE *f, const perf_args *a, const perf_config *c) {
  fprintf(f, "{\n  \"schema\": \"kolo-perf\",\n  \"schema_version\": %d,\n  \"label\": ", PERF_JSON_SCHEMA_VERSION);
  if (a->label) json_str(f, a->label);
  else fprintf(f, "null");
  /* what ran: the tool, the library, the ranks and the memory */
  fprintf(f, ",\n  \"config\": {\"tool\": ");
  json_str(f, c->tool);
  json_key_str(f, "library", c->library);
  json_key_str(f, "launch", c->launch);
  json_key_str(f, "memory", c->memory);
  if (c->timing) json_key_str(f, "timing", c->timing);
  fprintf(f, ", \"nranks\": %d, \"procs\": %d, \"threads\": %d", c->nranks, c->procs, c->threads);
  json_flags(f, a);
  fprintf(f, "},\n  \"results\": [");
}

void perf_json_result(perf_report *rep, const perf_row *row, int in_place) {
  const perf_result *r = &row->res[in_place];
  const perf_args *a = rep->args;
  fprintf(rep->json,
          "%s\n    {\"cycle\": %d, \"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": %d, "
          "\"in_place\": %s, \"time_us\": %.3f, \"cputime_us\": %.3f, \"algbw\": %.4f, \"busbw\": %.4f, "
          "\"wrong\": %llu",
          rep->rows++ ? "," : "", row->cycle, row->sizes.bytes, row->sizes.elems, perf_type_name(a->type),
          perf_redop_column(a), row->root, in_place ? "true" : "false", r->time_us, r->cpu_us, r->algbw, r->busbw,
          (unsigned long long)r->wrong);
  if (r->has_wall) fprintf(rep->json, ", \"wall_us\": %.3f", r->wall_us);
  fprintf(rep->json, "}");
}

void perf_json_tail(perf_report *rep, double avg_busbw) {
  FILE *f = rep->json;
  fprintf(f, "\n  ],\n  \"wrong\": %llu,\n  \"avg_busbw\": %.4f", (unsigned long long)rep->wrong, avg_busbw);
  if (rep->ceiling_gbps > 0) {
    fprintf(f, ",\n  \"ceiling\": {\"busbw\": %.4f, \"source\": ", rep->ceiling_gbps);
    json_str(f, rep->ceiling_source);
    fprintf(f, "}");
  }
  fprintf(f, "\n}\n");
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) perror(rep->args->json);
  rep->json = NULL;
}
