// The device backend's MLP step (device_mlp.cpp) on the host twin of its kernels: what the CUDA
// MLP test does not cover. That test itself (tests/cuda/cuda_mlp.cpp: every precision,
// activation, mode, optimizer, fault and resume against the CPU backend) runs on the twin as
// device_mlp_on_host_twin.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "fpscope/gpu/device_mlp.hpp"
#include "fpscope/gpu/host_device_ops.hpp"
#include "device_block_records.hpp"
#include "fpscope/gpu/training_data.hpp"

using namespace fpscope;

TEST_CASE("the device MLP records block statistics from the values before each cast, as the CPU backend does") {
  TrainingConfig config;
  config.layer_sizes = {20, 48, 36, 10};
  config.precision = Precision::fp16;
  config.rounding = RoundingMode::stochastic;
  config.record_blocks = parse_block_recording("mxfp8-e4m3");
  MlpTrainer cpu(config);
  DeviceMlpTrainer device(config, make_host_device_ops());
  TrainingData data("synthetic", config.layer_sizes, 1);
  Eigen::MatrixXf x;
  std::vector<int> y;
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    data.next_batch(64, x, y);
    const StepResult want = cpu.step(x, y, true), got = device.step(x, y, true, true);
    testing::check_block_records(got, want, step);
  }
}

TEST_CASE("the device MLP refuses batches that do not fit and states of another shape") {
  TrainingConfig config;
  config.layer_sizes = {20, 48, 36, 10};
  config.precision = Precision::bf16;
  CHECK_THROWS_AS(DeviceMlpTrainer(config, nullptr), std::invalid_argument);
  DeviceMlpTrainer device(config, make_host_device_ops());
  CHECK(device.name() == "host twin");
  CHECK(device.format() == formats::bf16);
  CHECK_THROWS_AS(device.step(Eigen::MatrixXf::Zero(4, 21), std::vector<int>(4, 0), false, true), std::invalid_argument);
  CHECK_THROWS_AS(device.step(Eigen::MatrixXf::Zero(4, 20), std::vector<int>(3, 0), false, true), std::invalid_argument);
  TrainerState wrong = device.state();
  wrong.weights[1] = Eigen::MatrixXf::Zero(3, 3);
  CHECK_THROWS_AS(device.restore(wrong), std::invalid_argument);
  TrainerState unsized_optimizer = device.state();
  unsized_optimizer.optimizer.first.assign(6, std::vector<float>(5, 0.0f));
  CHECK_THROWS_AS(device.restore(unsized_optimizer), std::invalid_argument);
  CHECK(device.state().weights[1].cwiseEqual(MlpTrainer(config).state().weights[1]).all());
}
