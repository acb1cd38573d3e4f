/* perf_topo_nvml.c - NVLink through NVML for kolo-perf topo, loaded at run
 * time (dlopen of libnvidia-ml.so.1, the driver's): kolo never links it,
 * so the same binary runs where there is no driver.  The few declarations
 * are NVML's own (nvml.h, stable across versions). */
#include <dlfcn.h>
#include <string.h>

#include "perf/perf_topo.h"

typedef int nvml_return;                /* nvmlReturn_t: 0 NVML_SUCCESS */
typedef struct nvml_device *nvml_device; /* nvmlDevice_t */
typedef struct {                        /* nvmlPciInfo_t */
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
} nvml_pci_info;

#define NVML_NVLINK_MAX_LINKS 18

static struct {
  void *lib;
  int tried;
  char why[256];
  nvml_return (*init)(void);
  nvml_return (*shutdown)(void);
  nvml_return (*by_bus)(const char *, nvml_device *);
  nvml_return (*link_state)(nvml_device, unsigned, int *);
  nvml_return (*remote_pci)(nvml_device, unsigned, nvml_pci_info *);
  const char *(*error_string)(nvml_return);
} nvml;

static void *sym(const char *name) {
  void *p = dlsym(nvml.lib, name);
  if (p == NULL && nvml.why[0] == '\0') snprintf(nvml.why, sizeof nvml.why, "libnvidia-ml.so.1 has no %s", name);
  return p;
}

/* Loads and initializes NVML once; 0, or -1 with nvml.why. */
static int nvml_open(void) {
  if (nvml.tried) return nvml.lib ? 0 : -1;
  nvml.tried = 1;
  nvml.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml.lib == NULL) {
    const char *e = dlerror();
    snprintf(nvml.why, sizeof nvml.why, "NVML is not loaded: %s", e ? e : "dlopen(libnvidia-ml.so.1) failed");
    return -1;
  }
  *(void **)&nvml.init = sym("nvmlInit_v2");
  *(void **)&nvml.shutdown = sym("nvmlShutdown");
  *(void **)&nvml.by_bus = sym("nvmlDeviceGetHandleByPciBusId_v2");
  *(void **)&nvml.link_state = sym("nvmlDeviceGetNvLinkState");
  *(void **)&nvml.remote_pci = sym("nvmlDeviceGetNvLinkRemotePciInfo_v2");
  *(void **)&nvml.error_string = sym("nvmlErrorString");
  nvml_return r = nvml.why[0] ? -1 : nvml.init();
  if (r != 0 && nvml.why[0] == '\0') snprintf(nvml.why, sizeof nvml.why, "nvmlInit: %s", nvml.error_string(r));
  if (r == 0) return 0;
  dlclose(nvml.lib);
  nvml.lib = NULL;
  return -1;
}

void perf_topo_nvml_close(void) {
  if (nvml.lib == NULL) return;
  nvml.shutdown();
  dlclose(nvml.lib);
  nvml.lib = NULL;
}

/* "GPU 1" when the remote end is one of ours, else its PCI bus (an NVSwitch, a CPU). */
static void remote_name(const nvml_pci_info *pci, const char *const *buses, int n, char *buf, size_t len) {
  char id[32];
  snprintf(id, sizeof id, "%04x:%02x:%02x.0", pci->domain, pci->bus, pci->device);
  for (int i = 0; i < n; i++)
    if (strcmp(buses[i], id) == 0) {
      snprintf(buf, len, "GPU %d", i);
      return;
    }
  snprintf(buf, len, "%s (not a GPU here: an NVSwitch or a CPU)", id);
}

void perf_topo_nvlink(FILE *out, const char *bus, const char *const *gpu_buses, int ngpus) {
  nvml_device dev;
  if (nvml_open() != 0) {
    fprintf(out, "unknown (%s)\n", nvml.why);
    return;
  }
  nvml_return r = nvml.by_bus(bus, &dev);
  if (r != 0) {
    fprintf(out, "unknown (nvmlDeviceGetHandleByPciBusId(%s): %s)\n", bus, nvml.error_string(r));
    return;
  }
  int active = 0;
  for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; link++) {
    int on = 0;
    nvml_pci_info pci;
    if (nvml.link_state(dev, link, &on) != 0 || !on) continue; /* no such link, or down */
    char who[96] = "?";
    if (nvml.remote_pci(dev, link, &pci) == 0) remote_name(&pci, gpu_buses, ngpus, who, sizeof who);
    fprintf(out, "%slink %u -> %s", active++ ? ", " : "", link, who);
  }
  fprintf(out, "%s\n", active ? "" : "none active (PCIe only)");
}
