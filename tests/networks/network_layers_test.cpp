// The layer specification (network_layers.hpp): parsing, refusals with their reasons, and shapes
// and parameter counts against hand-computed values (the papers' ConvNets' published sizes).
#include "filkit/networks/network_layers.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace filkit {
namespace {

std::string error_of(const std::string& spec) {
  try {
    parse_network_layers(spec);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an error for '" << spec << "'";
  return "";
}

std::string plan_error(const std::string& spec, const std::vector<Index>& shape, Index K) {
  try {
    plan_network(parse_network_layers(spec), shape, K);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an error for '" << spec << "'";
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(NetworkLayers, ParsesTheIssuesExampleAndPrintsItBack) {
  const std::string spec = "conv:16:8:2:2,tanh,avgpool:2:1,conv:32:4:2,tanh,avgpool:2:1,flatten,dense:32,tanh,dense:10";
  const std::vector<LayerSpec> layers = parse_network_layers(spec);
  ASSERT_EQ(layers.size(), 10u);
  EXPECT_EQ(layers[0].kind, LayerKind::kConv);
  EXPECT_EQ(layers[0].out, 16);
  EXPECT_EQ(layers[0].kernel_h, 8);
  EXPECT_EQ(layers[0].stride_w, 2);
  EXPECT_EQ(layers[0].padding_h, 2);
  EXPECT_EQ(layers[2].kind, LayerKind::kAvgPool);
  EXPECT_EQ(layers[2].stride_h, 1);
  EXPECT_EQ(layers[3].padding_h, 0);
  EXPECT_EQ(parse_network_layers(to_string(layers)), layers);
  // Defaults: avgpool's stride is its kernel, as in PyTorch; blanks and case are ignored.
  const std::vector<LayerSpec> pool =
      parse_network_layers(" AvgPool:3 , softplus:2, gelu:tanh, elu:0.5, dense:4:nobias");
  EXPECT_EQ(pool[0].stride_h, 3);
  EXPECT_EQ(pool[1].beta, 2.0);
  EXPECT_TRUE(pool[2].gelu_tanh);
  EXPECT_EQ(pool[3].alpha, 0.5);
  EXPECT_FALSE(pool[4].bias);
  EXPECT_EQ(parse_network_layers(to_string(pool)), pool);
}

TEST(NetworkLayers, RefusesLayersThatAreNotSmoothOrCoupleExamplesAndSaysWhy) {
  EXPECT_TRUE(contains(error_of("conv:4:3,relu,flatten,dense:2"), "layer 2 'relu': relu is not smooth"));
  EXPECT_TRUE(contains(error_of("conv:4:3,relu,flatten,dense:2"), "use tanh"));
  EXPECT_TRUE(contains(error_of("maxpool:2"), "max pooling switches"));
  EXPECT_TRUE(contains(error_of("maxpool:2"), "use avgpool"));
  EXPECT_TRUE(contains(error_of("dense:3,batchnorm"), "couples the examples of a batch"));
  EXPECT_TRUE(contains(error_of("dense:3,dropout"), "random mask"));
  EXPECT_TRUE(contains(error_of("dense:3,leaky_relu"), "not smooth"));
  EXPECT_TRUE(contains(error_of("dense:3,swish"), "unknown layer 'swish'"));
  EXPECT_TRUE(contains(error_of("dense:3,swish"), "conv:OUT:K[:STRIDE[:PAD]]"));
}

TEST(NetworkLayers, BadArgumentsNameTheLayerAndTheField) {
  EXPECT_TRUE(contains(error_of("dense:0"), "layer 1 'dense:0': OUT '0' is not an integer in [1, 2^31]"));
  EXPECT_TRUE(contains(error_of("conv:4:x"), "K 'x'"));
  EXPECT_TRUE(contains(error_of("conv:4:3:0"), "STRIDE '0'"));
  EXPECT_TRUE(contains(error_of("conv:4:3:1:-1"), "PAD '-1'"));
  EXPECT_TRUE(contains(error_of("conv:4"), "expected conv:OUT:K[:STRIDE[:PAD]]"));
  EXPECT_TRUE(contains(error_of("dense:4:bias"), "'nobias'"));
  EXPECT_TRUE(contains(error_of("dense:4,,tanh"), "layer 2 '': empty layer"));
  EXPECT_TRUE(contains(error_of("tanh:2"), "no arguments"));
  EXPECT_TRUE(contains(error_of("softplus:nan"), "BETA 'nan'"));
  EXPECT_TRUE(contains(error_of("dense:1e40"), "OUT '1e40'"));
  EXPECT_TRUE(contains(error_of("avgpool:2:2:2"), "PAD must be at most half of K"));
  EXPECT_TRUE(contains(error_of("  "), "empty layer specification"));
}

TEST(NetworkLayers, ThePapersConvNetsHaveTheirPublishedSizes) {
  // MNIST ConvNet (reconstruction paper, section 6): 26,010 parameters on 1 x 28 x 28.
  const NetworkPlan mnist =
      plan_network(parse_network_layers(
                       "conv:16:8:2:2,tanh,avgpool:2:1,conv:32:4:2,tanh,avgpool:2:1,flatten,dense:32,tanh,dense:10"),
                   {1, 28, 28}, 10);
  EXPECT_EQ(mnist.parameter_count, 26010);
  EXPECT_EQ(mnist.layers[0].output_shape, (std::vector<Index>{16, 13, 13}));  // (28 + 4 - 8) / 2 + 1
  EXPECT_EQ(mnist.layers[2].output_shape, (std::vector<Index>{16, 12, 12}));
  EXPECT_EQ(mnist.layers[3].output_shape, (std::vector<Index>{32, 5, 5}));  // (12 - 4) / 2 + 1
  EXPECT_EQ(mnist.layers[6].output_shape, (std::vector<Index>{512}));
  EXPECT_EQ(mnist.layers[7].offset, 1040 + 8224);  // conv1 16 * 64 + 16, conv2 32 * 256 + 32
  // CIFAR-10 ConvNet on 3 x 32 x 32: 896 + 9248 + 18496 + 36928 + 73856 + 147584 + 262272 + 1290.
  const NetworkPlan cifar = plan_network(
      parse_network_layers("conv:32:3:1:1,tanh,conv:32:3:1:1,tanh,avgpool:2:2,conv:64:3:1:1,tanh,conv:64:3:1:1,"
                           "tanh,avgpool:2:2,conv:128:3:1:1,tanh,conv:128:3:1:1,tanh,avgpool:2:2,flatten,dense:128,"
                           "tanh,dense:10"),
      {3, 32, 32}, 10);
  EXPECT_EQ(cifar.parameter_count, 550570);
  EXPECT_EQ(cifar.layers[15].output_shape, (std::vector<Index>{2048}));  // flatten 128 x 4 x 4
  // Non-square images and rectangular outputs.
  const NetworkPlan wide = plan_network(parse_network_layers("conv:2:3,avgpool:2,flatten,dense:3"), {3, 7, 12}, 3);
  EXPECT_EQ(wide.layers[1].output_shape, (std::vector<Index>{2, 2, 5}));
  EXPECT_EQ(wide.parameter_count, (2 * 27 + 2) + (3 * 20 + 3));
}

TEST(NetworkLayers, ShapesThatDoNotFitNameTheLayer) {
  EXPECT_TRUE(contains(plan_error("dense:3", {1, 4, 4}, 3), "layer 1 (dense:3) takes a vector"));
  EXPECT_TRUE(contains(plan_error("dense:3", {1, 4, 4}, 3), "put flatten before it"));
  EXPECT_TRUE(contains(plan_error("conv:3:2,flatten,dense:3", {16}, 3), "takes an image"));
  EXPECT_TRUE(contains(plan_error("conv:3:2,flatten,dense:3", {16}, 3), "the data has no image shape"));
  EXPECT_TRUE(contains(plan_error("conv:3:5,flatten,dense:3", {1, 4, 4}, 3), "window larger than its padded input"));
  EXPECT_TRUE(contains(plan_error("flatten,dense:4", {1, 4, 4}, 3), "the data has 3 classes: end with dense:3"));
  EXPECT_TRUE(contains(plan_error("conv:3:2,tanh", {1, 4, 4}, 3), "output is 3 x 3 x 3"));
  EXPECT_TRUE(contains(plan_error("dense:2147483648,dense:2147483648,dense:2", {4}, 2), "beyond 2^40 parameters"));
}

}  // namespace
}  // namespace filkit
