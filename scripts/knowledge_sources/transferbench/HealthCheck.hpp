// Excerpt (the limits, verbatim) of src/client/Presets/HealthCheck.hpp, ROCm/TransferBench
// commit 168cdc167770c73ab2818798b19fa0f463359611. Each limit is in GB/s and is scaled by SFACTOR; the preset
// runs only on 8 x gfx942 (304 compute units: MI300X; 64: a CPX partition). Host copies read and write the
// CPU NUMA node closest to the GPU (GetClosestCpuNumaToGpu); HBM tests count bytes once per transfer.
enum {
  HBM_READ      = 0,
  HBM_WRITE     = 1,
  HBM_COPY      = 2,
  HBM_ADD       = 3,
  NUM_HBM_TESTS = 4
} HbmTests;

// All limits are scaled by this factor
#define SFACTOR 0.97

TestConfig Config_08_GFX0942_304 = {
  .unidirHostToDeviceCopyLimit   = 50,
  .unidirDeviceToHostCopyLimit   = 50,
  .bidirDmaCopyLimit             = 90,
  .a2aUnrollFactor               = 2,
  .a2aNumSubExecs                = 8,
  .a2aCopyLimit                  = 45,
  .hbmBlockSize                  = { 384,  256,  320,  256},
  .hbmUnrollFactor               = {   7,    4,    8,    7},
  .hbmTemporalMode               = {   3,    3,    3,    3},
  .hbmLimit                      = {4980, 4850, 2045, 1405},
};

TestConfig Config_08_GFX0942_064 = {
  .unidirHostToDeviceCopyLimit   = 50,
  .unidirDeviceToHostCopyLimit   = 50,
  .bidirDmaCopyLimit             = 90,
  .a2aUnrollFactor               = 2,
  .a2aNumSubExecs                = 8,
  .a2aCopyLimit                  = 45,
  .hbmBlockSize                  = { 448,  448,  448,  384},
  .hbmUnrollFactor               = {   8,    3,    8,    7},
  .hbmTemporalMode               = {   3,    3,    3,    3},
  .hbmLimit                      = {4180, 2800, 1400, 1055},
};
