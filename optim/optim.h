// Everything of optim/ in one include: optimizers, schedulers, gradient clipping, checkpoints.
#pragma once

#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/optimizers.h"
