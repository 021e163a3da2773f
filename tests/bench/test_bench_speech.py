"""`python -m fastcollate bench --cases speech`: the suite checks its outputs against
transformers before timing, and the CLI prints its table and writes its JSON."""

from __future__ import annotations

import json

from fastcollate.bench import cli, speech_suite


def test_speech_suite_times_equal_outputs():
    results = speech_suite.run(speech_suite.SpeechSettings(batch_sizes=[2], repeat=1),
                               progress=lambda line: None)
    (result,) = results
    assert result.batch_size == 2
    assert speech_suite.SAMPLING_RATE <= result.samples <= 16 * speech_suite.SAMPLING_RATE
    assert result.transformers_ms > 0 and result.fastcollate_ms > 0 and result.copy_ms > 0
    assert "speedup" in result.as_dict()
    assert "/copy" in speech_suite.format_table(results)


def test_cli_speech_case(tmp_path, capsys):
    path = tmp_path / "speech.json"
    code = cli.bench_main(["--cases", "speech", "--batch-sizes", "2", "--repeat", "1",
                     "--json", str(path)])
    assert code == 0
    assert "Wav2Vec2FeatureExtractor.pad" in capsys.readouterr().out
    record = json.loads(path.read_text())
    assert record["arguments"]["cases"] == ["speech"]
    assert record["results"][0]["batch_size"] == 2
