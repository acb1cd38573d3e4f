/* perf_report.c - nccl-tests' table (same columns and widths) and its JSON
 * twin, schema PERF_JSON_SCHEMA_VERSION: every field is in docs/perf-json.md,
 * and a change to a field's name, type or meaning comes with a new version. */
#include "perf/perf_report.h"

/* The redop column: the op's name, or "none" for collectives without one. */
static const char *redop_column(const perf_args *a) {
  return perf_coll_has_op(a->coll) ? perf_op_name(a->op) : "none";
}

void perf_report_sweep_line(FILE *out, const perf_args *a) {
  int factor = a->step_factor > 1;
  fprintf(out, "# minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d validation: %d\n", a->min_bytes,
          a->max_bytes, factor ? a->step_factor : a->step_bytes, factor ? "factor" : "bytes", a->warmup, a->iters,
          a->check);
  if (a->offset != 0) fprintf(out, "# buffers %d bytes past a 4 KiB boundary (--offset)\n", a->offset);
}

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
  json_key_str(f, "redop", redop_column(a));
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

static void json_head(FILE *f, const perf_args *a, const perf_config *c) {
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

static void json_result(perf_report *rep, const perf_row *row, int in_place) {
  const perf_result *r = &row->res[in_place];
  const perf_args *a = rep->args;
  fprintf(rep->json,
          "%s\n    {\"cycle\": %d, \"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": %d, "
          "\"in_place\": %s, \"time_us\": %.3f, \"cputime_us\": %.3f, \"algbw\": %.4f, \"busbw\": %.4f, "
          "\"wrong\": %llu",
          rep->rows++ ? "," : "", row->cycle, row->sizes.bytes, row->sizes.elems, perf_type_name(a->type),
          redop_column(a), row->root, in_place ? "true" : "false", r->time_us, r->cpu_us, r->algbw, r->busbw,
          (unsigned long long)r->wrong);
  if (r->has_wall) fprintf(rep->json, ", \"wall_us\": %.3f", r->wall_us);
  fprintf(rep->json, "}");
}

static void json_tail(perf_report *rep, double avg_busbw) {
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

int perf_report_open(perf_report *rep, FILE *out, const perf_args *args, const perf_config *cfg) {
  *rep = (perf_report){.out = out, .args = args};
  if (args->json && (rep->json = fopen(args->json, "w")) == NULL) {
    perror(args->json);
    return -1;
  }
  if (rep->json) json_head(rep->json, args, cfg);
  fprintf(out, "# %s %s: %s, %d ranks (%d processes x %d threads, %s), %s memory\n", cfg->tool,
          perf_coll_name(args->coll), cfg->library, cfg->nranks, cfg->procs, cfg->threads, cfg->launch,
          cfg->memory);
  perf_report_sweep_line(out, args);
  if (cfg->timing) fprintf(out, "# time: %s\n", cfg->timing);
  fprintf(out, "#\n# Using devices\n");
  return 0;
}

void perf_report_table_header(perf_report *rep) {
  FILE *o = rep->out;
  fprintf(o, "#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n",
          "", "", "", "", "");
  fprintf(o, "# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  const char *time = rep->args->report_cputime ? "cputime" : "time";
  for (int i = 0; i < 2; i++) fprintf(o, "  %7s  %6s  %6s  %6s", time, "algbw", "busbw", "#wrong");
  fprintf(o, "\n# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int i = 0; i < 2; i++) fprintf(o, "  %7s  %6s  %6s  %5s", "(us)", "(GB/s)", "(GB/s)", "");
  fprintf(o, "\n");
  fflush(o);
}

void perf_result_bw(perf_result *r, const perf_args *a, size_t bytes, int nranks) {
  double sec = r->time_us * 1e-6;
  r->algbw = sec > 0 ? (double)bytes / 1e9 / sec : 0;
  r->busbw = r->algbw * perf_bus_factor(a->coll, nranks);
}

/* -C: the time column is the CPU time (nccl-tests' "cputime"). */
static void print_result(FILE *o, const perf_result *r, int cputime) {
  if (!r->done) {
    fprintf(o, "  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  double us = cputime ? r->cpu_us : r->time_us;
  int decimals = us >= 10000.0 ? 0 : us >= 100.0 ? 1 : 2;
  fprintf(o, "  %7.*f  %6.2f  %6.2f  %6llu", decimals, us, r->algbw, r->busbw, (unsigned long long)r->wrong);
}

void perf_report_row(perf_report *rep, const perf_row *row) {
  const perf_args *a = rep->args;
  fprintf(rep->out, "%12zu  %12zu  %8s  %6s  %6d", row->sizes.bytes, row->sizes.elems, perf_type_name(a->type),
          redop_column(a), row->root);
  for (int p = 0; p < 2; p++) {
    const perf_result *r = &row->res[p];
    print_result(rep->out, r, a->report_cputime);
    if (!r->done) continue;
    rep->bw_sum += r->busbw;
    rep->bw_count++;
    rep->wrong += r->wrong;
    if (rep->json) json_result(rep, row, p);
  }
  fprintf(rep->out, "\n");
  fflush(rep->out);
}

void perf_report_close(perf_report *rep, int failed) {
  if (failed) {
    if (rep->json) fclose(rep->json); /* as it stands: not valid JSON */
    return;
  }
  double avg = rep->bw_count ? rep->bw_sum / rep->bw_count : 0;
  fprintf(rep->out, "# Out of bounds values : %llu %s\n", (unsigned long long)rep->wrong,
          rep->wrong ? "FAILED" : "OK");
  fprintf(rep->out, "# Avg bus bandwidth    : %g \n#\n", avg);
  fflush(rep->out);
  if (rep->json) json_tail(rep, avg);
}

void perf_report_ceiling(perf_report *rep, double gbps, const char *source) {
  rep->ceiling_gbps = gbps;
  snprintf(rep->ceiling_source, sizeof rep->ceiling_source, "%s", source);
  fprintf(rep->out, "# busbw ceiling: %.2f GB/s (%s)\n", gbps, source);
}
