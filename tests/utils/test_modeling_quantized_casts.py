# Copyright 2026 The HuggingFace Team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
import torch

from transformers import AutoModelForCausalLM, BitsAndBytesConfig, GPT2Config, GPT2LMHeadModel
from transformers.testing_utils import TestCasePlus, require_bitsandbytes


@require_bitsandbytes
class QuantizedModelCastTest(TestCasePlus):
    def test_bfloat16_refuses_a_quantized_model_as_half_and_float_do(self):
        path = self.get_auto_remove_tmp_dir()
        GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=64, n_head=2, vocab_size=64, n_positions=16)).save_pretrained(
            path
        )
        quantization_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.float32, quantization_config=quantization_config
        )
        self.assertTrue(model.is_quantized)
        quantized = model.transformer.h[0].mlp.c_fc.weight.clone()
        for cast in (model.half, model.float, model.bfloat16):
            with self.assertRaises(ValueError) as context:
                cast()
            self.assertIn("quantized", str(context.exception))
        self.assertTrue(torch.equal(model.transformer.h[0].mlp.c_fc.weight, quantized))
        self.assertEqual(model.transformer.wte.weight.dtype, torch.float32)
