// autograd/ops.h — every differentiable op in one include, except the unary math functions (exp,
// log, relu, sigmoid, ...: autograd/ops_unary.h, kept apart so that adding one recompiles only
// the files that use them). The registry is autograd/op_list.h.
#pragma once

#include "autograd/no_grad.h"
#include "autograd/op_list.h"
#include "autograd/ops_attention.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_grouped_matmul.h"
#include "autograd/ops_compare.h"
#include "autograd/ops_index.h"
#include "autograd/ops_loss.h"
#include "autograd/ops_mask.h"
#include "autograd/ops_matmul.h"
#include "autograd/ops_norm.h"
#include "autograd/precision.h"
#include "autograd/ops_reduce.h"
#include "autograd/ops_rope.h"
#include "autograd/ops_shape.h"
#include "autograd/ops_slot_mix.h"
#include "autograd/ops_softmax.h"
#include "autograd/variable.h"
