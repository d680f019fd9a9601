"""Maven coordinates (runtime.maven), without Maven: the pom it writes and what it refuses."""

from __future__ import annotations

import pytest

from streamsql.runtime import maven


def test_a_coordinate_may_carry_a_classifier():
    pom = maven._pom(["org.apache.iceberg:iceberg-core:1.10.0:tests", "org.x:y:2"], ["org.z:*"])
    assert ("<artifactId>iceberg-core</artifactId><version>1.10.0</version><classifier>tests</classifier>"
            "<exclusions>") in pom
    assert "<artifactId>y</artifactId><version>2</version><exclusions>" in pom
    assert pom.count("<exclusion><groupId>org.z</groupId><artifactId>*</artifactId></exclusion>") == 2


@pytest.mark.parametrize("coordinate", ["org.x:y", "org.x:y:1:tests:more", "org.x:y:1 2"])
def test_what_is_no_coordinate_is_refused_before_maven_starts(coordinate, tmp_path):
    with pytest.raises(maven.MavenError, match="is not group:artifact:version\\[:classifier\\]"):
        maven._folder([coordinate], (), tmp_path)
