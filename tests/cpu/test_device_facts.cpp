#include "splitkv/tuner/device_facts.hpp"

#include <cstdlib>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "splitkv/tuner/fake_gpu.hpp"

namespace splitkv::tuner {
namespace {

// Sets an environment variable for one test and puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(VisibleDevices, OrdinalsMapThroughCudaVisibleDevices) {
  {
    ScopedEnv unset("CUDA_VISIBLE_DEVICES", nullptr);
    EXPECT_FALSE(cuda_visible_devices().has_value());
    EXPECT_EQ(visible_device_entry(2), "2");
    EXPECT_EQ(machine_device_index(2), 2);
  }
  ScopedEnv visible("CUDA_VISIBLE_DEVICES", "3, 1,GPU-5b1a0c2e");
  EXPECT_EQ(cuda_visible_devices(), (std::vector<std::string>{"3", "1", "GPU-5b1a0c2e"}));
  EXPECT_EQ(machine_device_index(0), 3);
  EXPECT_EQ(machine_device_index(1), 1);
  EXPECT_EQ(visible_device_entry(2), "GPU-5b1a0c2e");
  EXPECT_EQ(machine_device_index(2), 2);  // a UUID: the ordinal is all there is
  EXPECT_EQ(machine_device_index(7), 7);
}

TEST(FakeGpus, ListTheirModelsAndHonourCudaVisibleDevices) {
  ScopedEnv fake("SPLITKV_FAKE_GPUS", "NVIDIA H200, NVIDIA H200,NVIDIA H100 80GB HBM3");
  {
    ScopedEnv unset("CUDA_VISIBLE_DEVICES", nullptr);
    const DeviceListing all = list_sweep_devices();
    ASSERT_TRUE(all.ok) << all.error;
    ASSERT_EQ(all.devices.size(), 3u);
    EXPECT_EQ(all.devices[2].name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(all.devices[1].uuid, "GPU-fa4e0000-0000-4000-8000-000000000001");
  }
  {
    ScopedEnv visible("CUDA_VISIBLE_DEVICES", "2,GPU-fa4e0000-0000-4000-8000-000000000000,9,1");
    const DeviceListing some = list_sweep_devices();
    ASSERT_EQ(some.devices.size(), 2u);  // as CUDA: up to the first entry that names no device
    EXPECT_EQ(some.devices[0].index, 2);
    EXPECT_EQ(some.devices[1].index, 0);
  }
  ScopedEnv none("CUDA_VISIBLE_DEVICES", "");
  EXPECT_FALSE(list_sweep_devices().ok);
}

}  // namespace
}  // namespace splitkv::tuner
