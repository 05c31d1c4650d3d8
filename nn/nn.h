// nn/nn.h — every module, loss and helper of the nn layer, in one include.
#pragma once

#include "nn/attention.h"
#include "nn/decoder.h"
#include "nn/decoder_block.h"
#include "nn/decoder_config.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/generate.h"
#include "nn/kv_cache.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/mlp.h"
#include "nn/module.h"
#include "nn/module_list.h"
#include "nn/rmsnorm.h"
